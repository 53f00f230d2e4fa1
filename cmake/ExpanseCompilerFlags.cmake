# Interface targets carrying the flags for the project's own code. Third-party code
# (GoogleTest, CLI11, benchmark) never links these, so their warnings cannot break
# our -Werror build. expanse_apply_project_flags() is the one way targets get them.

add_library(expanse_warnings INTERFACE)
target_compile_options(expanse_warnings INTERFACE
  -Wall
  -Wextra
  -Werror
  -Wpedantic
  -Wshadow
  -Wnon-virtual-dtor
  -Woverloaded-virtual
  -Wold-style-cast
  -Wcast-qual
  -Wformat=2
  -Wimplicit-fallthrough
  -Wmissing-declarations)
# g++ 12 at -O2/-O3 reports -Wrestrict on ordinary std::string concatenation inlined from
# libstdc++ (GCC bug 105329), which -Werror would turn into a failed Release build.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(expanse_warnings INTERFACE -Wno-restrict)
endif()

# Sanitizer flags: empty unless EXPANSE_SANITIZE or EXPANSE_BUILD_FUZZ is on.
add_library(expanse_sanitizers INTERFACE)

if(EXPANSE_SANITIZE)
  # -fno-sanitize-recover=all turns every UBSan finding into a failing exit, so a
  # test cannot pass while printing a runtime error.
  set(expanse_sanitize_flags
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_compile_options(expanse_sanitizers INTERFACE ${expanse_sanitize_flags})
  target_link_options(expanse_sanitizers INTERFACE ${expanse_sanitize_flags})
  if(EXPANSE_BUILD_BENCH)
    message(WARNING "EXPANSE_BUILD_BENCH with EXPANSE_SANITIZE: timings will be meaningless")
  endif()
endif()

if(EXPANSE_BUILD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR
      "EXPANSE_BUILD_FUZZ needs clang (libFuzzer ships with it); CMAKE_CXX_COMPILER is "
      "${CMAKE_CXX_COMPILER_ID} (${CMAKE_CXX_COMPILER}). Configure a fresh build dir with "
      "-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang.")
  endif()
  # All project code gets coverage instrumentation (fuzzer-no-link) so libFuzzer can
  # see which branches of the libraries an input reaches; only the fuzz executables
  # link the libFuzzer main (see fuzz/CMakeLists.txt).
  set(expanse_fuzz_flags
    -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
    -fno-sanitize-recover=all)
  target_compile_options(expanse_sanitizers INTERFACE ${expanse_fuzz_flags})
  target_link_options(expanse_sanitizers INTERFACE ${expanse_fuzz_flags})
endif()

# Hardening for optimised builds, what Debian's dpkg-buildflags gives its own packages (and
# what lintian checks in ours, scripts/package): stack protector and clash protection,
# control-flow protection, fortified libc calls, read-only relocations bound at start-up.
# Debian's gcc builds PIE by default. Not with the sanitizers, which bring their own checks
# and with which _FORTIFY_SOURCE does not mix, nor at -O0, where _FORTIFY_SOURCE does nothing.
add_library(expanse_hardening INTERFACE)
if(NOT EXPANSE_SANITIZE AND NOT EXPANSE_BUILD_FUZZ)
  set(expanse_optimised "$<CONFIG:Release,RelWithDebInfo,MinSizeRel>")
  # _FORTIFY_SOURCE marks ftruncate, chmod and friends warn_unused_result, and g++ warns even
  # where a best-effort call is cast to void (GCC bug 66425), so -Wunused-result is off here;
  # the sanitizer build every test runs keeps it, [[nodiscard]] included.
  # Control-flow protection is CET on x86-64 and branch protection (PAC/BTI) on arm64; gcc
  # knows each flag only on its own architecture.
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|i.86)$")
    set(expanse_cf_protection -fcf-protection)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
    set(expanse_cf_protection -mbranch-protection=standard)
  else()
    set(expanse_cf_protection "")
  endif()
  target_compile_options(expanse_hardening INTERFACE
    "$<${expanse_optimised}:-fstack-protector-strong;-fstack-clash-protection;${expanse_cf_protection};-D_FORTIFY_SOURCE=2;-Wno-unused-result>")
  target_link_options(expanse_hardening INTERFACE
    "$<${expanse_optimised}:LINKER:-z,relro;LINKER:-z,now>")
endif()

# Gives a project target the warnings and, when enabled, the sanitizer or hardening flags.
# PRIVATE: consumers are project targets that get the same flags themselves.
function(expanse_apply_project_flags target)
  target_link_libraries(${target} PRIVATE expanse_warnings expanse_sanitizers expanse_hardening)
endfunction()
