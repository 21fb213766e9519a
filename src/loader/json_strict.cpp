#include "loader/json_strict.h"

#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "loader/text_util.h"

namespace dsv4 {
namespace {

// Names the duplicated key and the keys of the objects enclosing it (for a safetensors header: the tensor name).
template <typename OpenObjects>
[[noreturn]] void fail_duplicate(std::string_view source, std::string_view what, const OpenObjects& open_objects) {
    std::string path;
    for (size_t i = 0; i + 1 < open_objects.size(); ++i) {
        path += (path.empty() ? "" : " / ") + quote_name(open_objects[i].last_key);
    }
    fail("{}: {} JSON has the key {} twice in one object{}{}", source, what, quote_name(open_objects.back().last_key),
         path.empty() ? "" : " (inside ", path.empty() ? "" : path + ")");
}

}  // namespace

nlohmann::json parse_json_strict(std::string_view text, std::string_view source, std::string_view what, int max_depth) {
    using nlohmann::json;
    struct OpenObject {
        std::set<std::string, std::less<>> keys;
        std::string last_key;
    };
    std::vector<OpenObject> open_objects;  // innermost last
    auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
        switch (event) {
            case json::parse_event_t::object_start:
            case json::parse_event_t::array_start:
                if (depth >= max_depth) fail("{}: {} JSON is nested deeper than {} levels", source, what, max_depth);
                if (event == json::parse_event_t::object_start) open_objects.emplace_back();
                break;
            case json::parse_event_t::object_end:
                if (!open_objects.empty()) open_objects.pop_back();
                break;
            case json::parse_event_t::key:
                if (!open_objects.empty()) {
                    OpenObject& object = open_objects.back();
                    object.last_key = parsed.get<std::string>();
                    if (!object.keys.insert(object.last_key).second) fail_duplicate(source, what, open_objects);
                }
                break;
            case json::parse_event_t::array_end:
            case json::parse_event_t::value:
                break;
        }
        return true;
    };
    try {
        return json::parse(text.begin(), text.end(), callback);
    } catch (const json::exception& e) {
        fail("{}: {} is not valid JSON: {}", source, what, e.what());
    }
}

}  // namespace dsv4
