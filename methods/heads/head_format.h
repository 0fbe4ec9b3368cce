// The pieces of the head file format (docs/methods/heads.md, "File format") that every head's
// body is written with, so that a head defined beside its method (FedMITR's ViT) writes and reads
// its body the same way.
#pragma once

#include "core/types.h"

#include <cstdint>
#include <iosfwd>
#include <string>

namespace fednode::head_format {

void write_u64(std::ostream& out, uint64_t v);
uint64_t read_u64(std::istream& in, const std::string& where);  // InputError naming `where` when truncated
void write_string(std::ostream& out, const std::string& s);
std::string read_string(std::istream& in, const std::string& where);
// rows, cols (u64 each), then float32 values row-major; read in chunks, so that a corrupt shape in a
// short file costs one chunk; refused when empty, implausibly large or not finite.
void write_matrix(std::ostream& out, const MatrixF& m);
MatrixF read_matrix(std::istream& in, const std::string& where);
void write_vector(std::ostream& out, const VectorF& v);
VectorF read_vector(std::istream& in, const std::string& where);

}  // namespace fednode::head_format
