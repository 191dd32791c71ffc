# volt_source_archive(ROOT OUTPUT): a custom command that packs Volt's own source below ROOT (what a build of the
# library and the volt command reads, without the tests, benchmarks, examples and the web page) as a tar.gz and
# writes OUTPUT, a C++ source holding it (embed_source.cmake), for the notebook that builds Volt by itself.
# Used by tools/generator/CMakeLists.txt and the fuzz build (tests/fuzz/CMakeLists.txt).
set(VOLT_EMBED_SOURCE_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_source.cmake)
function(volt_source_archive root output)
  file(GLOB_RECURSE files CONFIGURE_DEPENDS RELATIVE ${root}
    ${root}/cmake/* ${root}/include/* ${root}/src/* ${root}/tools/volt/* ${root}/tools/generator/*)
  list(FILTER files EXCLUDE REGEX "^tools/generator/web/")
  list(APPEND files CMakeLists.txt)
  list(SORT files)
  get_filename_component(dir ${output} DIRECTORY)
  set(list_file ${dir}/volt-source-files.txt)
  set(archive ${dir}/volt-source.tar.gz)
  string(REPLACE ";" "\n" lines "${files}")
  file(CONFIGURE OUTPUT ${list_file} CONTENT "${lines}\n")
  list(TRANSFORM files PREPEND ${root}/ OUTPUT_VARIABLE paths)
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -E tar czf ${archive} --mtime=2000-01-01 --format=gnutar --files-from=${list_file}
    COMMAND ${CMAKE_COMMAND} -DARCHIVE=${archive} -DOUTPUT=${output} -P ${VOLT_EMBED_SOURCE_SCRIPT}
    WORKING_DIRECTORY ${root}
    DEPENDS ${paths} ${list_file} ${VOLT_EMBED_SOURCE_SCRIPT}
    COMMENT "Packing Volt's sources for the notebook"
    VERBATIM)
endfunction()
