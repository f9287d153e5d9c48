package main

import (
	"path/filepath"
	"strconv"

	"openbot/config"
	"openbot/core"
)

// fileLimits maps the files section onto the engine: inbound files go to the
// thread's workspace folder (<workspace>/thread-<id>, as the file tools see
// it), with the configured caps.
func fileLimits(cfg *config.Config) core.FileLimits {
	root := cfg.Workspace
	return core.FileLimits{
		Dir: func(id core.ThreadID) string {
			return filepath.Join(root, "thread-"+strconv.FormatUint(uint64(id), 10))
		},
		MaxFileBytes:    cfg.Files.MaxFileBytes,
		MaxMessageBytes: cfg.Files.MaxMessageBytes,
	}
}
