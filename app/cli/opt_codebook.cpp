// --codebook FILE.json (any number, before or after the subcommand): loads generic codebook
// tables so that datatype strings naming them (cb<I><M>_<compute>_<label>...) parse.
#include "castscope/codebook.hpp"
#include "cli/command.hpp"

namespace castscope::cli {
namespace {

void codebook_opt(CLI::App& app) {
  // Subcommands registered before this one did not inherit fallthrough; set it on all of them
  // once every registrar has run, so the option may follow the subcommand too.
  app.fallthrough();
  app.preparse_callback([&app](size_t) {
    for (CLI::App* sub : app.get_subcommands({})) sub->fallthrough();
  });
  app.add_option_function<std::vector<std::string>>(
         "--codebook",
         [](const std::vector<std::string>& files) {
           for (const std::string& f : files) load_codebook_file(f);
         },
         "Codebook table file (JSON, docs/formats.md) for generic cb... datatypes")
      ->check(CLI::ExistingFile)
      ->trigger_on_parse();
}

Register reg_codebook(codebook_opt);

}  // namespace
}  // namespace castscope::cli
