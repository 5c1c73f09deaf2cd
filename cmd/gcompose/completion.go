package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// The scripts ask gcompose itself for candidates (urfave/cli's
// --generate-bash-completion), so they follow new commands and flags.
const bashCompletion = `# gcompose bash completion: source <(gcompose completion bash)
_gcompose_complete() {
  local cur words
  cur="${COMP_WORDS[COMP_CWORD]}"
  words=("${COMP_WORDS[@]:0:$COMP_CWORD}")
  local opts
  if [[ "$cur" == -* ]]; then
    opts=$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${words[@]}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
  [[ ${#COMPREPLY[@]} -eq 0 ]] && compopt -o default 2>/dev/null
  return 0
}
complete -F _gcompose_complete gcompose
`

const zshCompletion = `#compdef gcompose
# gcompose zsh completion: source <(gcompose completion zsh), or save as _gcompose in your $fpath
_gcompose() {
  local -a opts
  local cur=${words[-1]}
  if [[ "$cur" == -* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _gcompose gcompose
`

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script: bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: `bash:  source <(gcompose completion bash)     (or save it in /etc/bash_completion.d/gcompose)
   zsh:   source <(gcompose completion zsh)
   fish:  gcompose completion fish > ~/.config/fish/completions/gcompose.fish`,
		Action: func(c *cli.Context) error {
			switch strings.ToLower(c.Args().First()) {
			case "bash":
				_, err := fmt.Fprint(c.App.Writer, bashCompletion)
				return err
			case "zsh":
				_, err := fmt.Fprint(c.App.Writer, zshCompletion)
				return err
			case "fish":
				s, err := c.App.ToFishCompletion()
				if err != nil {
					return withCode(exitError, fmt.Errorf("fish completion: %w", err))
				}
				_, err = fmt.Fprint(c.App.Writer, s)
				return err
			default:
				return withCode(exitUsage, fmt.Errorf("completion takes a shell: bash, zsh or fish"))
			}
		},
	}
}
