package agents

// compactionMarker starts the system prompt of a compaction call.
const compactionMarker = "You compact a chat thread"
