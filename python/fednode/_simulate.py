"""fednode.simulate: `fednode simulate` with keywords for options and arrays for data."""
import json

from . import _fednode
from ._arrays import rows
from ._errors import UsageError

__all__ = ["simulate"]

_VALUED, _FLAGS = _fednode.simulate_options()


def command_line(options, valued, flags, command):
    """Keywords as a command line: name_with_underscores=value as --name-with-dashes VALUE, a flag
    as True, a flag's negation (--no-NAME) as NAME=False; None leaves an option out."""
    argv = []
    for key, value in options.items():
        name = key.replace("_", "-")
        if value is None:
            continue
        if name in flags or ("no-" + name) in flags:
            if not isinstance(value, bool):
                raise UsageError(f"{key}: a flag, give True or False (got {value!r})")
            if name in flags and value:
                argv.append("--" + name)
            elif ("no-" + name) in flags and not value:
                argv.append("--no-" + name)
            continue
        if name not in valued:
            raise UsageError(f"{key}: not an option of {command} (see `{command} --help`)")
        if isinstance(value, bool):
            raise UsageError(f"{key}: takes a value, not {value}")
        if isinstance(value, (list, tuple, range)):
            value = ",".join(str(v) for v in value)
        argv += ["--" + name, repr(value) if isinstance(value, float) else str(value)]
    return argv


def simulate(train=None, test=None, *, class_names=None, progress=None, **options):
    """Runs a whole federation in this process, as `fednode simulate` does, and returns its report.

    train, test   (X, y): X a samples x features matrix (float32 and C-ordered is read in place,
                  anything else converted once; a torch tensor through NumPy), y integer labels;
                  or None with dataset="fashion-mnist".
    class_names   label i's name, for the report and saved heads (optional).
    progress      called with each progress line (optional; quiet=True silences it).
    options       `fednode simulate`'s options: method="fedpft", topology="star", nodes=10,
                  partition="dirichlet", dirichlet_alpha=0.5, seed=0 or seeds=[1, 2, 3],
                  baselines=False, report="out.json", save_heads="heads/", ... .

    Returns the JSON report (docs/report.md) as a dict; with seeds=, the sweep's. Raises UsageError
    for a keyword, InputError for the data (both ValueErrors), KeyboardInterrupt on Ctrl-C.
    """
    if (train is None) != (test is None):
        raise UsageError("give both train=(X, y) and test=(X, y), or neither (with dataset=...)")
    argv = command_line(options, _VALUED, _FLAGS, "fednode simulate")
    arrays = [None, None, None, None]
    if train is not None:
        arrays = [*rows(train, "train"), *rows(test, "test")]
    return json.loads(_fednode.simulate(argv, *arrays, list(class_names or []), progress))
