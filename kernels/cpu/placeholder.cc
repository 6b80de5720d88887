// Placeholder so the library has a source until the kernels land.
namespace llm::kernels {}
