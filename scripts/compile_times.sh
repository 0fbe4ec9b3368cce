#!/usr/bin/env bash
# Where a fresh build's time goes (issue 51, goal 6): configures BUILD_DIR from scratch with a
# compiler launcher that records every compile's wall time and peak memory, builds TARGETS
# (default: fednode_cli, what the demo builds) with -j$(nproc), and prints the total wall time,
# the slowest translation units, and the compile time summed by folder and by kind (LibTorch
# *_torch.cpp, the rest).
# Usage: scripts/compile_times.sh BUILD_DIR [TARGET...]   (extra cmake options in CMAKE_ARGS)
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:?usage: compile_times.sh BUILD_DIR [TARGET...]}"
shift
targets=("${@:-fednode_cli}")
rm -rf "$build"
mkdir -p "$build"
build="$(cd "$build" && pwd)"
log="$build/compile_times.tsv"
launcher="$build/time_compile.sh"
cat > "$launcher" <<'LAUNCH'
#!/usr/bin/env bash
# Runs one compile, appending "seconds<TAB>max RSS KiB<TAB>source" to the log beside this script.
src=""
for ((i = 1; i <= $#; i++)); do
  [[ "${!i}" == "-c" ]] && { j=$((i + 1)); src="${!j}"; }
done
exec /usr/bin/time -a -o "$(dirname "$0")/compile_times.tsv" -f "%e	%M	$src" "$@"
LAUNCH
chmod +x "$launcher"
: > "$log"
# shellcheck disable=SC2086  # CMAKE_ARGS are words
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" ${CMAKE_ARGS:-} >/dev/null
start=$(date +%s.%N)
cmake --build "$build" --target "${targets[@]}" -j"$(nproc)" >"$build/build.log" 2>&1
end=$(date +%s.%N)
python3 - "$log" "$src" "$(echo "$end - $start" | bc)" "${targets[*]}" <<'PY'
import collections, os, sys
log, src, wall, targets = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
rows = []
for line in open(log):
    parts = line.rstrip("\n").split("\t")
    if len(parts) == 3 and parts[2]:
        rows.append((float(parts[0]), int(parts[1]), os.path.relpath(parts[2], src)))
total = sum(r[0] for r in rows)
print(f"targets {targets}: {wall:.0f} s wall on {os.cpu_count()} cores, {len(rows)} compiles, "
      f"{total:.0f} s of compiling summed")
by_folder, by_kind = collections.Counter(), collections.Counter()
for seconds, _, path in rows:
    by_folder[path.split("/")[0]] += seconds
    by_kind["LibTorch (*_torch.cpp)" if path.endswith("_torch.cpp") else "the rest"] += seconds
print("by kind:   " + ", ".join(f"{k} {v:.0f} s" for k, v in by_kind.most_common()))
print("by folder: " + ", ".join(f"{k} {v:.0f} s" for k, v in by_folder.most_common()))
print("slowest:")
for seconds, rss, path in sorted(rows, reverse=True)[:15]:
    print(f"  {seconds:6.1f} s  {rss / 1024:6.0f} MB  {path}")
PY
