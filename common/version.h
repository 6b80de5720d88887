// The version of every binary (`--version`, the router's GET /version): the project version
// from CMakeLists.txt and the git commit the build was configured at.
#pragma once

namespace llm {

// "0.1.0"
const char* Version();
// Short commit hash, or "unknown" outside a git checkout.
const char* GitCommit();
// "llmserve 0.1.0 (commit 0123456789ab)"
const char* VersionLine();

}  // namespace llm
