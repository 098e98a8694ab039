package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

var docFlag = regexp.MustCompile(`(^|\s|\[)--([a-z][a-z0-9-]*)`)

// TestDocumentedFlagsAreTheRealOnes: every `keel …` command line in the
// README and docs/operations.md names a real command, and every --flag on
// it is one that command takes.
func TestDocumentedFlagsAreTheRealOnes(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, file := range []string{"../../README.md", "../../docs/operations.md"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			line = strings.TrimSpace(line)
			if i := strings.Index(line, "#"); i >= 0 {
				line = line[:i]
			}
			if !strings.HasPrefix(line, "keel ") {
				continue
			}
			cmd, rest := resolve(root(), strings.Fields(line)[1:])
			if cmd == nil {
				t.Errorf("%s: %q names no command", file, line)
				continue
			}
			for _, m := range docFlag.FindAllStringSubmatch(strings.Join(rest, " "), -1) {
				if m[2] == "help" {
					continue
				}
				if lookup(cmd, m[2]) == nil {
					t.Errorf("%s: %q: %s takes no --%s", file, line, cmd.CommandPath(), m[2])
				}
				checked++
			}
		}
	}
	if checked < 15 {
		t.Fatalf("only %d documented flags found: the parser is broken", checked)
	}
}

// resolve walks words to the deepest subcommand (a word "a|b" is its
// first alternative; global flags before the verb are skipped with their
// value).
func resolve(cmd *cobra.Command, words []string) (*cobra.Command, []string) {
	for len(words) > 0 {
		w := words[0]
		if strings.HasPrefix(w, "--") && !cmd.HasSubCommands() {
			break // the leaf's own flags: checked by the caller
		}
		if strings.HasPrefix(w, "--") {
			if len(words) > 1 && !strings.Contains(w, "=") && !strings.HasPrefix(words[1], "-") {
				if f := lookup(cmd, strings.TrimPrefix(w, "--")); f != nil && f.Value.Type() != "bool" {
					words = words[2:]
					continue
				}
			}
			words = words[1:]
			continue
		}
		name := strings.SplitN(w, "|", 2)[0]
		var next *cobra.Command
		for _, c := range cmd.Commands() {
			if c.Name() == name || c.HasAlias(name) {
				next = c
			}
		}
		if next == nil {
			break
		}
		cmd, words = next, words[1:]
	}
	return cmd, words
}

func lookup(cmd *cobra.Command, name string) *pflag.Flag {
	for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.PersistentFlags(), cmd.InheritedFlags()} {
		if f := fs.Lookup(name); f != nil {
			return f
		}
	}
	for p := cmd.Parent(); p != nil; p = p.Parent() {
		if f := p.PersistentFlags().Lookup(name); f != nil {
			return f
		}
	}
	return nil
}
