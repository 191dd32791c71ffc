# Writes OUTPUT: a C++ source holding every file under TEMPLATE_DIR as a byte array, so that the
# `volt` binary renders projects from anywhere. Run at build time; see tools/generator/CMakeLists.txt.
file(GLOB_RECURSE files RELATIVE "${TEMPLATE_DIR}" "${TEMPLATE_DIR}/*")
list(SORT files)
set(body "")
set(table "")
set(i 0)
foreach(f ${files})
  file(READ "${TEMPLATE_DIR}/${f}" hex HEX)
  string(LENGTH "${hex}" hex_len)
  math(EXPR size "${hex_len} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
  string(APPEND body "const char kFile${i}[] = {${bytes}0};\n")
  string(APPEND table "      {\"${f}\", kFile${i}, ${size}UL},\n")
  math(EXPR i "${i} + 1")
endforeach()
file(WRITE "${OUTPUT}.tmp" "// Generated from tools/generator/templates by embed_templates.cmake; do not edit.\n"
  "#include \"generator_internal.h\"\n\nnamespace volt::generator {\nnamespace {\n${body}}  // namespace\n\n"
  "const std::vector<EmbeddedFile>& embedded_files() {\n  static const std::vector<EmbeddedFile> files{\n${table}  };\n"
  "  return files;\n}\n\n}  // namespace volt::generator\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
