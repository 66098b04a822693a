// json_duplicates.h: keys given twice in one JSON object, found while nlohmann's reader runs.
//
// JSON allows a repeated key and the reader keeps the last one silently: a trace saying
// "dur_us": 10 and "dur_us": 999999 for one launch, or a config that sets a key twice (a merge
// mistake), says two things. Traces, plans and gswapd's config refuse them, naming each by its
// path ("launches[3].dur_us", "weights.train").
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gswap::policy {

// The reader's callback (nlohmann::json::parse(text, std::ref(keys))): keeps every value, records
// the path of every key given twice in its object.
class DuplicateKeys {
 public:
  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    switch (event) {
      case E::object_start:
      case E::array_start:
        frames_.push_back({value_path(), event == E::array_start, 0, {}, ""});
        break;
      case E::key:
        if (!frames_.empty()) {
          Frame& f = frames_.back();
          f.key = parsed.get<std::string>();
          if (!f.keys.insert(f.key).second)
            repeated_.push_back(f.path.empty() ? f.key : f.path + "." + f.key);
        }
        break;
      case E::object_end:
      case E::array_end:
        if (!frames_.empty()) frames_.pop_back();
        element_done();
        break;
      case E::value:
        element_done();
        break;
    }
    return true;
  }
  // Every key given twice, by its path, in the order read.
  const std::vector<std::string>& repeated() const { return repeated_; }

 private:
  struct Frame {
    std::string path;  // of this object or array ("" at the top)
    bool array;
    std::size_t index;           // arrays: the element being read
    std::set<std::string> keys;  // objects: the keys read
    std::string key;             // objects: the last key read
  };
  // The path of the value being read now.
  std::string value_path() const {
    if (frames_.empty()) return "";
    const Frame& f = frames_.back();
    if (f.array) return f.path + "[" + std::to_string(f.index) + "]";
    return f.path.empty() ? f.key : f.path + "." + f.key;
  }
  void element_done() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }
  std::vector<Frame> frames_;
  std::vector<std::string> repeated_;
};

}  // namespace gswap::policy
