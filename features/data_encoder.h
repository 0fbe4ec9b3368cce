// The ImageEncoder (core/image_encoder.h) of a node's data: images go the way the node's own
// images went before it federated. Through a backbone: the same file, preprocessing and execution
// as extract_features, then the data's feature expansion. Raw pixels: the pixels themselves, then
// the expansion. The backbone is loaded on the first encode, so data that never meet a synthetic
// image cost nothing.
#pragma once

#include "core/image_encoder.h"
#include "features/backbone.h"
#include "features/expansion.h"

#include <memory>
#include <string>

namespace fednode {

std::shared_ptr<const ImageEncoder> backbone_encoder(std::string model, Preprocessing preprocessing,
                                                     BackboneOptions options, FeatureExpansion expansion);
std::shared_ptr<const ImageEncoder> pixel_encoder(FeatureExpansion expansion);

}  // namespace fednode
