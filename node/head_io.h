// A head in a file of its own, with what a program needs to use it: which classes it names, which
// features it reads and how an image becomes them, who trained it. methods/ does no file I/O, so
// the file lives here, beside the state directory that writes one (as faiss keeps index_io apart
// from its indexes). Format "FNHEAD2" (version 1, the head alone, stays readable):
// docs/methods/heads.md, "Head files".
#pragma once

#include "core/contributors.h"
#include "features/feature_recipe.h"
#include "methods/heads/head.h"

#include <memory>
#include <string>
#include <vector>

namespace fednode {

// What a head file says about its head.
struct HeadCard {
  std::string method;                    // "fedpft", ...; empty when unknown (version 1 files)
  std::string run;                       // the run's name
  std::string node;                      // the node's name (or id) that holds it
  bool personal = false;                 // personalised FedCGS's personal head
  Contributors contributors;             // whose data it was trained on
  std::vector<std::string> class_names;  // label i's name; empty: the labels are their own names
  // How images become the features it reads. Version 1 files: Source::Features, fingerprint "unknown".
  FeatureRecipe recipe;
  std::string written_by;                // "fednode 0.1.0"

  // class_names[label], or the label's number.
  std::string class_name(int label) const;
};

struct HeadFile {
  int version = 2;
  std::shared_ptr<const Head> head;
  HeadCard card;
};

// The file's bytes: version 2, checksummed. Throws InputError for a card that does not fit the
// head (class names or a feature width other than the head's).
std::string head_file_bytes(const Head& head, const HeadCard& card);
// Writes them to `path`, replacing what was there; throws InputError when it cannot.
void save_head_file(const Head& head, const HeadCard& card, const std::string& path);

// A head file's bytes, read like network input: every length bounded before anything is
// allocated, the checksum verified before anything is believed. `where` names the source in errors.
HeadFile parse_head_file(const std::string& bytes, const std::string& where);
// Throws InputError for a path that is not a regular file or whose bytes parse_head_file refuses.
HeadFile read_head_file(const std::string& path);
// The head alone (read_head_file(path).head), for callers that need no card.
std::unique_ptr<Head> load_head_file(const std::string& path);

// `fednode head info`: the card and the head's shape, as lines or as a JSON object.
std::string head_info_text(const HeadFile& file);
std::string head_info_json(const HeadFile& file);

}  // namespace fednode
