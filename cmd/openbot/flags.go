package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// parseFlags parses args into fs for a command that takes nothing but flags.
// It reports done with the exit code when the command must not go on: exitOK
// after --help (the flag package has printed the flags), exitUsage for a bad
// flag (the flag package has said which) or for a stray argument, which it
// names on stderr; a config file given without --config gets a hint.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		return flagExit(err), true
	}
	if fs.NArg() == 0 {
		return exitOK, false
	}
	arg := fs.Arg(0)
	hint := ""
	if fs.Lookup("config") != nil && (strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml")) {
		hint = " (give a config file as --config " + arg + ")"
	}
	fmt.Fprintf(stderr, "openbot %s: unexpected argument %q%s\n", fs.Name(), arg, hint)
	return exitUsage, true
}

// configFlags is the flag set of the command name that reads a config file:
// --config FILE (config.yaml unless given), errors to stderr.
func configFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs, fs.String("config", "config.yaml", "configuration file")
}

// flagExit is the exit code after fs.Parse failed with err: exitOK for --help
// (the flag package has printed the flags), else exitUsage (it has said which
// flag is wrong).
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// isHelp reports whether arg asks a command with subcommands for its usage.
func isHelp(arg string) bool { return arg == "help" || isHelpFlag(arg) }

// isHelpFlag reports whether arg is the flag package's help flag.
func isHelpFlag(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// asksHelp reports whether args hold -h, -help or --help before a "--": the
// command will print its flags and stop.
func asksHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelpFlag(a) {
			return true
		}
	}
	return false
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
