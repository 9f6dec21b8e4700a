#include "lmkit/core/app.h"

#include <c10/util/Exception.h>

#include <iostream>

#include "lmkit/core/error.h"

namespace lmkit {

void add_runtime_flags(CLI::App& app, RuntimeOptions& options) {
  app.add_option("--threads", options.threads, "CPU threads for LibTorch (0: every core)")->check(CLI::NonNegativeNumber);
  app.add_option("--device", options.device, "cpu, cuda or cuda:N");
  app.add_option("--seed", options.seed, "seed for every random number generator");
}

namespace {

int fail(const std::string& message, ExitCode code) {
  // One line: the first line of the message is what the user needs.
  std::cerr << "error: " << message.substr(0, message.find('\n')) << std::endl;
  return static_cast<int>(code);
}

}  // namespace

int run_app(CLI::App& app, int argc, char** argv, const std::function<void()>& body) {
  // Subcommand callbacks run inside parse(), so parsing and the body share one handler.
  try {
    app.parse(argc, argv);
    body();
    return 0;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return fail(std::string(e.what()) + " (see --help)", ExitCode::kInput);
  } catch (const Error& e) {
    return fail(e.what(), e.code());
  } catch (const c10::Error& e) {
    return fail(e.what_without_backtrace(), ExitCode::kRuntime);
  } catch (const std::bad_alloc&) {
    return fail("out of memory", ExitCode::kRuntime);
  } catch (const std::exception& e) {
    return fail(e.what(), ExitCode::kRuntime);
  }
}

}  // namespace lmkit
