// libjpeg's error handling for the decoder and the encoder: libjpeg's default error_exit calls exit(); this
// manager formats the message and jumps back to the setjmp of the call that reads or writes.
#pragma once

#include <cstdio>  // before jpeglib.h, which uses FILE

#include <jpeglib.h>

#include <csetjmp>

namespace volt::data::detail {

struct JpegErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

inline void jpeg_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

}  // namespace volt::data::detail
