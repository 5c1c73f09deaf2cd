package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// The scripts ask gcompose itself for candidates (urfave/cli's
// --generate-bash-completion), so they follow new commands and flags; the
// candidates are matched as plain strings (compgen -W would expand a "$" in
// them). After -f they offer descriptor files, after other flags that take
// a file, any file; where gcompose has nothing to offer, the shell's files.
const bashCompletion = `# gcompose bash completion: source <(gcompose completion bash)
_gcompose_complete() {
  local cur prev line
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  COMPREPLY=()
  case "$prev" in
    -f|--file)
      compopt -o filenames 2>/dev/null
      while IFS= read -r line; do
        if [[ -d "$line" ]]; then COMPREPLY+=("$line"); continue; fi
        case "$line" in *.yaml|*.yml|*.zip) COMPREPLY+=("$line") ;; esac
      done < <(compgen -f -- "$cur")
      return 0 ;;
    --var-file|--state-key-file|--etcd-cacert|--etcd-cert|--etcd-key|--etcd-password-file)
      compopt -o default 2>/dev/null
      return 0 ;;
    --target|--replace)
      local addr=() i
      for ((i = 0; i < COMP_CWORD - 1; i++)); do addr+=("${COMP_WORDS[i]}"); done
      while IFS= read -r line; do
        [[ -n "$line" && "$line" == "$cur"* ]] && COMPREPLY+=("$line")
      done < <(GCOMPOSE_COMPLETE=addresses "${addr[@]}" --generate-bash-completion 2>/dev/null)
      return 0 ;;
  esac
  local words=() i
  for ((i = 0; i < COMP_CWORD; i++)); do words+=("${COMP_WORDS[i]}"); done
  [[ "$cur" == -* ]] && words+=("$cur")
  while IFS= read -r line; do
    [[ -n "$line" && "$line" == "$cur"* ]] && COMPREPLY+=("$line")
  done < <("${words[@]}" --generate-bash-completion 2>/dev/null)
  [[ ${#COMPREPLY[@]} -eq 0 ]] && compopt -o default 2>/dev/null
  return 0
}
complete -F _gcompose_complete gcompose
`

// zsh runs the bash function through bashcompinit, so both shells complete
// the same way.
const zshCompletion = `#compdef gcompose
# gcompose zsh completion: source <(gcompose completion zsh)
autoload -U +X compinit && compinit -u
autoload -U +X bashcompinit && bashcompinit
` + bashCompletion

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

// completeResources is the shell completion of commands that take resource
// addresses (state show, logs): the flags after "-", else the resources the
// state records for the application (--app, -f, or ./gcompose.yaml).
func completeResources(c *cli.Context) {
	args := os.Args
	if len(args) > 2 && strings.HasPrefix(args[len(args)-2], "-") {
		cli.DefaultCompleteWithFlags(c.Command)(c)
		return
	}
	printAddresses(c)
}

// completeTargets is the completion of plan, deploy and destroy: their
// flags; after --target or --replace (the script asks with
// GCOMPOSE_COMPLETE=addresses, the flag left out), the resources the state
// records. Their positional arguments are files, which the shell completes.
func completeTargets(c *cli.Context) {
	if os.Getenv("GCOMPOSE_COMPLETE") == "addresses" {
		printAddresses(c)
		return
	}
	cli.DefaultCompleteWithFlags(c.Command)(c)
}

// printAddresses prints the resources the state records for the
// application, one a line; nothing when there is none.
func printAddresses(c *cli.Context) {
	name := c.String("app")
	if name == "" {
		files := fileArgs(c)
		for _, a := range c.Args().Slice() {
			if looksLikeDescriptor(a) { // gcompose plan app.yaml --target <TAB>
				files = append(files, a)
			}
		}
		p, err := loadFiles(c, files)
		if err != nil {
			return
		}
		name = p.App.Name
	}
	st, err := openStore(c)
	if err != nil {
		return
	}
	defer st.Close()
	doc, err := st.Load(c.Context, name)
	if err != nil {
		return
	}
	for _, n := range doc.Names() {
		fmt.Fprintln(c.App.Writer, n)
	}
}
