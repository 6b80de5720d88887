// Giving back the pages of a read-only file mapping (GGUF, safetensors) once its bytes were
// copied elsewhere: they come back from the file if read again.
#pragma once

#include <cstddef>

namespace llm {

// madvise(MADV_DONTNEED) on the whole pages inside [data, data + bytes), if that range lies
// inside the mapping [map, map + map_size); returns whether it did. Ranges outside are refused:
// on anonymous memory the same call would zero it.
bool ReleaseMappedPages(const void* map, size_t map_size, const void* data, size_t bytes);

}  // namespace llm
