// Package openbot holds what the module ships beside its packages: the example
// configuration, which `openbot chat` runs when there is no config file and
// `openbot config example` prints.
package openbot

import _ "embed" // the example configuration

// ExampleConfig is config.example.yaml as built into the binary.
//
//go:embed config.example.yaml
var ExampleConfig []byte

// SlackManifest is docs/slack-app-manifest.yaml: the Slack app openbot needs,
// scopes and events included, which `openbot init` prints.
//
//go:embed docs/slack-app-manifest.yaml
var SlackManifest string
