namespace llm {}
