#include "common/version.h"

#ifndef LLM_VERSION
#define LLM_VERSION "0.0.0"
#endif
#ifndef LLM_GIT_COMMIT
#define LLM_GIT_COMMIT "unknown"
#endif

namespace llm {

const char* Version() {
  return LLM_VERSION;
}
const char* GitCommit() {
  return LLM_GIT_COMMIT;
}
const char* VersionLine() {
  return "llmserve " LLM_VERSION " (commit " LLM_GIT_COMMIT ")";
}

}  // namespace llm
