#pragma once

#include <stdexcept>
#include <string>

namespace castscope {

// Every failure caused by user input (a datatype string, a file, a shape, an option) is reported
// as an Error whose message names what was wrong; the CLI and GUI show the message and go on.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Thrown when a long job sees its cancel flag; callers treat it as a normal outcome.
class Cancelled : public Error {
 public:
  Cancelled() : Error("cancelled") {}
};

}  // namespace castscope
