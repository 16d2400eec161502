// The --out folder of a gsm8k run: what a previous run left there, the settings its answers
// depend on (settings.json, compared on --resume) and clearing it for --overwrite.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace dsv4::eval {

// The files a gsm8k run writes into --out.
const std::vector<std::string>& run_folder_files();

// The run files already in `dir` (results.jsonl only when it is not empty), by name.
std::vector<std::string> previous_run_files(const std::string& dir);

// Removes the run files from `dir`; returns "" or what could not be removed.
std::string clear_run_folder(const std::string& dir);

// settings.json of `dir`: the recorded object, or null when the file is absent. Throws
// std::runtime_error naming the file when it is not a JSON object.
nlohmann::json read_run_settings(const std::string& dir);
bool write_run_settings(const std::string& dir, const nlohmann::json& settings, std::string* err);

// One line per setting whose recorded value differs from this run's ("max_new_tokens: recorded
// 512, now 256"); settings only one side records are compared when both give them.
std::vector<std::string> settings_differences(const nlohmann::json& recorded,
                                              const nlohmann::json& now);

}  // namespace dsv4::eval
