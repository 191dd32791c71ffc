// The page's files, embedded at build time by cmake/embed_assets.cmake (file name -> content).
#pragma once

#include <map>
#include <string>

namespace volt::generator::web::detail {

/// Every file of tools/generator/web/assets/, by file name ("app.js").
const std::map<std::string, std::string>& embedded_assets();

/// The documentation the page links to, from docs/ of the Volt sources, by file name ("generator.md").
const std::map<std::string, std::string>& embedded_docs();

}  // namespace volt::generator::web::detail
