// How lmkit-suite runs the apps: each as a child process with its output appended to a
// log, the suite's plugins passed on, SIGTERM/SIGINT handed to the running app (which
// stops as a signalled run does), and an app's failure reported with its own error line.
#pragma once

#include <string>
#include <vector>

namespace lmkit::tasks {

/// `argv` as a shell reads it back, quoted where needed (the logs' first line, --dry-run).
std::string command_line(const std::vector<std::string>& argv);
/// From now on SIGTERM and SIGINT go on to the running app, and the suite stops after it.
void catch_stop_signals();
/// Error (exit 3) naming `what` when a stop signal came: "call it again to go on".
void stop_if_signalled(const std::string& what);
/// Runs the app `argv` (with every loaded plugin) to its end, stdout and stderr appended to
/// `log` after its command line; its failure is an InputError or RuntimeError naming `what`,
/// the app, its last error line and the log.
void run_app_logged(std::vector<std::string> argv, const std::string& log, const std::string& what);
/// The app `name` beside the running executable (build/bin/lmkit-finetune); RuntimeError when absent.
std::string sibling_app(const std::string& name);

}  // namespace lmkit::tasks
