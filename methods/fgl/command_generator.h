// FGL's third generator (docs/methods/fgl.md, "An external generator"): any program, run as a
// command, that draws images for a file of prompts -- the way to use diffusers' Stable Diffusion
// with fednode today. The contract:
//   fednode makes a fresh folder W and runs  /bin/sh -c 'CMD "$@"' fednode-generator W/prompts.jsonl W/images
//   W/prompts.jsonl holds one JSON object per request, in order:
//     {"index": i, "label": L, "name": "...", "prompt": "...", "negative_prompt": "...",
//      "caption": "..." (instance-level requests only), "count": n, "seed": s}
//   the command writes exactly `count` PNG or JPEG files into W/images/<index>/ (any names; read
//   in name order) and exits 0. Every image must have the same size and channels, square.
//   Its standard output and error go to W/log.txt; a failure's message quotes the log's end.
// W is removed afterwards (kept, and named, when something failed). The folder, the program and
// the image files are the host's (methods/host.h); the contract is here.
#pragma once

#include "methods/fgl/generator.h"
#include "methods/host.h"

#include <memory>
#include <string>

namespace fednode {

// `command` is run by /bin/sh in work folders `host` makes. Throws InputError at once for an
// empty command.
std::shared_ptr<const Generator> make_command_generator(const std::string& command, std::shared_ptr<const Host> host);

}  // namespace fednode
