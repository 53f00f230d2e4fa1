#include "install/token_intake.h"

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace expanse::install {

SecretString& SecretString::operator=(SecretString&& other) noexcept {
  if (this != &other) {
    Wipe();
    value_ = std::move(other.value_);
    other.Wipe();
  }
  return *this;
}

void SecretString::Wipe() {
  // explicit_bzero cannot be optimised away; the capacity covers the small-string buffer too.
  if (value_.capacity() > 0)
    explicit_bzero(value_.data(), value_.capacity());
  value_.clear();
}

namespace {

// Reads one line from the terminal with echo off, restoring the terminal however it ends.
Result<SecretString> PromptHidden(const char* prompt) {
  int fd = ::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return FailedPreconditionError("cannot open the terminal for the token prompt");
  termios saved{};
  if (::tcgetattr(fd, &saved) != 0) {
    ::close(fd);
    return FailedPreconditionError("the token prompt needs a terminal");
  }
  termios quiet = saved;
  quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
  quiet.c_lflag |= ECHONL;
  ::tcsetattr(fd, TCSAFLUSH, &quiet);
  (void)!::write(fd, prompt, std::strlen(prompt));
  std::string line;
  char c = 0;
  while (line.size() < 4096) {
    ssize_t n = ::read(fd, &c, 1);
    if (n <= 0 || c == '\n')
      break;
    line.push_back(c);
  }
  ::tcsetattr(fd, TCSAFLUSH, &saved);
  ::close(fd);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
    line.pop_back();
  return SecretString(std::move(line));
}

}  // namespace

Result<TokenIntake> ObtainInstallToken(std::optional<SecretString> from_environment,
                                       bool allow_prompt) {
  if (from_environment)
    return TokenIntake{std::move(*from_environment), TokenSource::kEnvironment};
  if (!allow_prompt) {
    return FailedPreconditionError("no install token: set EXPANSE_INSTALL_TOKEN")
        .WithReason("install_token_missing");
  }
  if (!::isatty(STDIN_FILENO)) {
    return FailedPreconditionError(
               "no install token: pass it in EXPANSE_INSTALL_TOKEN (sudo "
               "--preserve-env=EXPANSE_INSTALL_TOKEN expanse compute install ...) or run on a "
               "terminal to get a hidden prompt")
        .WithReason("install_token_missing");
  }
  EXPANSE_ASSIGN_OR_RETURN(SecretString typed, PromptHidden("Expanse install token: "));
  if (typed.empty())
    return InvalidArgumentError("no install token was entered").WithReason("install_token_missing");
  return TokenIntake{std::move(typed), TokenSource::kPrompt};
}

Status CheckTokenShape(std::string_view token) {
  if (!token.starts_with("exp_it_") || token.size() < 16 || token.size() > 256) {
    return InvalidArgumentError(
               "the install token does not look like one (it starts with exp_it_); copy it again "
               "from the console's Add compute panel")
        .WithReason("install_token_malformed");
  }
  for (char c : token) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    if (!ok) {
      return InvalidArgumentError("the install token contains characters a token never has")
          .WithReason("install_token_malformed");
    }
  }
  return OkStatus();
}

}  // namespace expanse::install
