// Where `dsv4 serve` finds its model: --model DIR, or the bundled demo model at a fixed path, and what the
// directory says about the chat template revision and the served name.
#pragma once

#include <string>

#include "tokenizer/chat_encoding.h"

namespace dsv4::server {

// $DSV4_BUNDLED_MODEL when set, else <repo>/models/demo (the trained demo model, committed; docs/demo-model.md).
std::string default_bundled_model_dir();

// `requested` when given, else the bundled model. Throws dsv4::Error with instructions when the directory (or its
// config.json) is missing.
std::string resolve_model_dir(const std::string& requested);

// "auto": DeepSeek-V4-Flash-0731 when config.json has the DSpark keys (dspark_block_size), else the original V4;
// "v4" / "v4-0731" force one. Throws dsv4::Error for anything else.
ChatTemplateRevision resolve_template_revision(const std::string& setting, const std::string& model_dir);

// The last path component of the model directory ("demo", "DeepSeek-V4-Flash").
std::string default_served_name(const std::string& model_dir);

}  // namespace dsv4::server
