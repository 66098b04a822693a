// json_duplicates.h: JSON read with every key given once and nesting bounded.
//
// JSON allows a repeated key and the reader keeps the last one silently: a trace saying
// "dur_us": 10 and "dur_us": 999999 for one launch, or a config that sets a key twice (a merge
// mistake), says two things. Traces, plans and gswapd's config refuse them, naming each by its
// path ("launches[3].dur_us", "weights.train"). They also refuse nesting deeper than any of
// them has (a few levels), so that what a hostile file costs stays bounded by its size.
//
// The document is built by nlohmann's own DOM builder, driven by SAX events (time linear in the
// text). nlohmann's parse with a callback rescans the enclosing array after every object it
// reads, which made a trace of 200,000 launches take a minute to read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

namespace gswap::policy {

// Deepest nesting read: traces, plans and configs nest at most 4 levels.
constexpr std::size_t kMaxJsonDepth = 64;

struct JsonRead {
  std::vector<std::string> repeated;  // every key given twice in its object, by path, in order
  std::string too_deep;  // the path of the first value nested deeper than kMaxJsonDepth
};

namespace json_detail {

// SAX events to nlohmann's DOM builder, with the keys of every open object and the position of
// the value being read.
class CheckedSax {
 public:
  using json = nlohmann::json;
  CheckedSax(json* out, JsonRead* read) : dom_(*out, /*allow_exceptions=*/true), read_(read) {}

  bool null() { return done(dom_.null()); }
  bool boolean(bool v) { return done(dom_.boolean(v)); }
  bool number_integer(json::number_integer_t v) { return done(dom_.number_integer(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return done(dom_.number_unsigned(v)); }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return done(dom_.number_float(v, s));
  }
  bool string(json::string_t& v) { return done(dom_.string(v)); }
  bool binary(json::binary_t& v) { return done(dom_.binary(v)); }
  bool start_object(std::size_t n) { return open(false) && dom_.start_object(n); }
  bool start_array(std::size_t n) { return open(true) && dom_.start_array(n); }
  bool key(json::string_t& k) {
    Frame& f = frames_.back();
    f.key = k;
    if (!f.keys.insert(k).second) read_->repeated.push_back(path());
    return dom_.key(k);
  }
  bool end_object() { return close(dom_.end_object()); }
  bool end_array() { return close(dom_.end_array()); }
  bool parse_error(std::size_t position, const std::string& token,
                   const nlohmann::detail::exception& e) {
    return dom_.parse_error(position, token, e);  // throws, as nlohmann::json::parse does
  }

 private:
  struct Frame {
    bool array = false;
    std::size_t index = 0;                 // arrays: the element being read
    std::string key;                       // objects: the last key read
    std::unordered_set<std::string> keys;  // objects: the keys read
  };
  // The path of the value being read now ("" at the top).
  std::string path() const {
    std::string p;
    for (const Frame& f : frames_) {
      if (f.array)
        p += "[" + std::to_string(f.index) + "]";
      else
        p += (p.empty() ? "" : ".") + f.key;
    }
    return p;
  }
  bool open(bool array) {
    if (frames_.size() >= kMaxJsonDepth) {
      read_->too_deep = path();
      return false;  // ends the read
    }
    frames_.push_back(Frame{array, 0, {}, {}});
    return true;
  }
  bool close(bool ok) {
    frames_.pop_back();
    return done(ok);
  }
  bool done(bool ok) {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    return ok;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  JsonRead* read_;
  std::vector<Frame> frames_;
};

}  // namespace json_detail

// Reads `text` into *out. Invalid JSON throws nlohmann::json::exception, as nlohmann::json::parse
// does; a value nested too deep stops the read (*out is then incomplete) and is named in the
// result, as is every key given twice.
inline JsonRead read_json(std::string_view text, nlohmann::json* out) {
  JsonRead read;
  json_detail::CheckedSax sax(out, &read);
  nlohmann::json::sax_parse(text.begin(), text.end(), &sax);
  return read;
}

}  // namespace gswap::policy
