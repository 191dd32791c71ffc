# Included by tests/CMakeLists.txt: the fuzz targets' harnesses built with the main build (g++, against
# libvolt and the generator) into one binary, volt_fuzz_replay, that runs them on the committed seed corpus
# and on every regression input, one ctest per target (label hostile). The libFuzzer build is CMakeLists.txt.
if(TARGET volt_generator_web)
  set(fuzz_dir ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
  set(volt_fuzz_targets cli checkpoint safetensors idx generator_options ui_api csv token_file image)
  set(fuzz_sources ${fuzz_dir}/replay_main.cpp ${fuzz_dir}/fuzz_support.cpp)
  foreach(name ${volt_fuzz_targets})
    list(APPEND fuzz_sources ${fuzz_dir}/${name}_fuzz.cpp)
  endforeach()
  add_executable(volt_fuzz_replay ${fuzz_sources})
  # Each harness names its target in a kTarget of its own: compiled one by one, as libFuzzer builds them.
  set_target_properties(volt_fuzz_replay PROPERTIES UNITY_BUILD OFF)
  target_link_libraries(volt_fuzz_replay PRIVATE volt::volt volt_generator_web volt_generator)
  target_include_directories(volt_fuzz_replay PRIVATE ${fuzz_dir})
  target_compile_options(volt_fuzz_replay PRIVATE -Wall -Wextra)
  foreach(name ${volt_fuzz_targets})
    file(GLOB fuzz_inputs CONFIGURE_DEPENDS ${fuzz_dir}/corpus/${name}/* ${fuzz_dir}/regressions/${name}/*)
    if(name STREQUAL "checkpoint")
      # Some inputs once made LibTorch's unpickler allocate gigabytes; load_checkpoint refuses them first now.
      # The 3 GiB address-space limit keeps a regression from taking the machine's memory.
      add_test(NAME fuzz.replay.${name}
        COMMAND sh -c "ulimit -v 3145728 && exec \"$0\" \"$@\"" $<TARGET_FILE:volt_fuzz_replay> ${name} ${fuzz_inputs})
    else()
      add_test(NAME fuzz.replay.${name} COMMAND volt_fuzz_replay ${name} ${fuzz_inputs})
    endif()
    set_tests_properties(fuzz.replay.${name} PROPERTIES LABELS hostile TIMEOUT 120)
  endforeach()
endif()
