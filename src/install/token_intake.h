// Reading the install token: from EXPANSE_INSTALL_TOKEN, else from a hidden prompt on the
// terminal. The token lives only in this process's memory: the variable is removed from the
// environment as soon as it is read (no child — scontrol, systemctl — inherits it), it is never
// echoed, logged, put in argv or written to a file, and its bytes are wiped when dropped.

#ifndef EXPANSE_INSTALL_TOKEN_INTAKE_H_
#define EXPANSE_INSTALL_TOKEN_INTAKE_H_

#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace expanse::install {

inline constexpr char kInstallTokenVariable[] = "EXPANSE_INSTALL_TOKEN";

// A string whose bytes are overwritten when it is destroyed or replaced.
class SecretString {
 public:
  SecretString() = default;
  explicit SecretString(std::string value) : value_(std::move(value)) {}
  SecretString(SecretString&& other) noexcept : value_(std::move(other.value_)) { other.Wipe(); }
  SecretString& operator=(SecretString&& other) noexcept;
  SecretString(const SecretString&) = delete;
  SecretString& operator=(const SecretString&) = delete;
  ~SecretString() { Wipe(); }

  std::string_view view() const { return value_; }
  bool empty() const { return value_.empty(); }

 private:
  void Wipe();
  std::string value_;
};

enum class TokenSource { kEnvironment, kPrompt };

struct TokenIntake {
  SecretString token;
  TokenSource source = TokenSource::kEnvironment;
};

// For a fresh install: the token from the environment (already taken), else a hidden prompt
// when stdin is a terminal, else an error saying how to pass it. `allow_prompt` is false for
// --reinstall, which never prompts.
Result<TokenIntake> ObtainInstallToken(std::optional<SecretString> from_environment,
                                       bool allow_prompt);

// The token's shape: exp_it_ and URL-safe characters. Checked before it is sent anywhere.
Status CheckTokenShape(std::string_view token);

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_TOKEN_INTAKE_H_
