// NumPy .npy files: features [n, d] and labels [n], read and written.
// Reading accepts format versions 1.0, 2.0 and 3.0, either byte order, C or Fortran order.
// Every field of the header is checked, and the data size is compared with the file size,
// before anything is allocated; bad files give an InputError naming the file and the problem.
#pragma once

#include "core/types.h"

#include <string>

namespace fednode {

enum class NpyFloat { Float32, Float16 };

// Features: dtype f2, f4 or f8 (f8 is narrowed to float32; values beyond float32 are rejected),
// shape (n, d). NaN or Inf is rejected with its row and column.
MatrixF read_npy_features(const std::string& path);

// Labels: any integer dtype (i1, u1, i2, u2, i4, u4, i8, u8, either byte order), shape (n,)
// or (n, 1). Negative labels and labels beyond int32 are rejected with their index.
Labels read_npy_labels(const std::string& path);

// Writes format 1.0, little-endian, C order, shape (n, d). Float16 rejects values that would
// overflow to infinity. The file is written beside `path` and renamed into place.
void write_npy_features(const std::string& path, const MatrixF& X,
                        NpyFloat dtype = NpyFloat::Float32);
// Writes '<i4', shape (n,).
void write_npy_labels(const std::string& path, const Labels& y);

// Reads both files and checks they describe the same samples. num_classes 0 infers
// max label + 1; otherwise every label must be below it.
// The class count labels imply (the largest + 1), refused with an InputError naming `where` when it
// is absurd: more than a million, or far more than the distinct labels that occur (one stray
// large label); `option` names how to give the count instead.
int infer_num_classes(const int32_t* y, int64_t n, const std::string& where, const std::string& option);

Features load_npy_dataset(const std::string& x_path, const std::string& y_path,
                          int num_classes = 0);

}  // namespace fednode
