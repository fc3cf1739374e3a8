// Command idem runs the transfers service with idem, reproduces the incident
// behind idem, and looks after idempotency records.
//
//	idem serve    run the transfers service (SQLite by default, PostgreSQL by URL)
//	idem demo     reproduce the incident three ways and audit the ledger
//	idem bench    measure overhead, replay and duplicate storms
//	idem sweep    delete expired records once
//	idem complete finish abandoned payouts once (one completer pass)
//	idem inspect  show one record
//	idem keys     list records, or the audit log of what operators changed
//	idem forget   delete one record so that its key runs again (audited)
//	idem pending  list leased work in flight or stuck, with its steps
//	idem resolve  record the final answer of stuck leased work (audited)
//	idem check    audit an HTTP endpoint's duplicate path
//	idem import   apply a CSV of transfers, re-runnable after a crash
//	idem relay    publish the transfer events idem serve staged (its outbox)
//	idem project  run a read model of the transfer events, each applied once
//
// Run "idem <command> -h" for a command's flags.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr, OwnsProcess: true}
	err := m.Run(ctx, os.Args[1:])
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		// Help was asked for and printed: not a failure.
	case errors.As(err, new(usageError)):
		fmt.Fprintln(os.Stderr, "idem:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "idem:", err)
		os.Exit(1)
	}
}

// Main is the program, with its output streams.
type Main struct {
	Stdout, Stderr io.Writer
	// OwnsProcess is set when the program is the process (idem's own
	// main), not a command run inside another program such as a test:
	// only then does serve set the runtime's soft memory limit.
	OwnsProcess bool
}

const usage = `idem makes retries safe. Usage:

	idem <command> [flags]

Commands:
	serve    run the transfers service (SQLite by default, PostgreSQL by URL)
	demo     reproduce the incident three ways and audit the ledger
	bench    measure overhead, replay and duplicate storms
	sweep    delete expired idempotency records once
	complete finish abandoned payouts once (one completer pass)
	inspect  show one idempotency record
	keys     list idempotency records (--audit: what operators changed)
	forget   delete one record so that the next request with its key runs again
	pending  list leased work in flight or stuck, with its steps and last error
	resolve  record the final answer of stuck leased work, or abandon it
	check    audit any HTTP endpoint's duplicate path (retries, duplicates, keys)
	import   apply a CSV of transfers to the ledger; re-running it applies nothing twice
	relay    publish the transfer events staged by idem serve -publish (its outbox relay, alone)
	project  run a read model of the transfer events, each event applied once
	outbox   show the outbox's pending and parked events; unpark them

Run "idem <command> -h" for a command's flags.
`

// usageError is a mistake in the command line; main exits 2 with a hint.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// Run runs the sub-command named by args[0].
func (m *Main) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return usageError{"no command given; try \"idem demo\""}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return (&serveCommand{Main: m}).Run(ctx, rest)
	case "demo":
		return (&demoCommand{Main: m}).Run(ctx, rest)
	case "bench":
		return (&benchCommand{Main: m}).Run(ctx, rest)
	case "sweep":
		return (&sweepCommand{Main: m}).Run(ctx, rest)
	case "complete":
		return (&completeCommand{Main: m}).Run(ctx, rest)
	case "inspect":
		return (&inspectCommand{Main: m}).Run(ctx, rest)
	case "keys":
		return (&keysCommand{Main: m}).Run(ctx, rest)
	case "forget":
		return (&forgetCommand{Main: m}).Run(ctx, rest)
	case "pending":
		return (&pendingCommand{Main: m}).Run(ctx, rest)
	case "resolve":
		return (&resolveCommand{Main: m}).Run(ctx, rest)
	case "check":
		return (&checkCommand{Main: m}).Run(ctx, rest)
	case "import":
		return (&importCommand{Main: m}).Run(ctx, rest)
	case "relay":
		return (&relayCommand{Main: m}).Run(ctx, rest)
	case "project":
		return (&projectCommand{Main: m}).Run(ctx, rest)
	case "outbox":
		return (&outboxCommand{Main: m}).Run(ctx, rest)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(m.Stdout, usage)
		return nil
	default:
		return usageError{fmt.Sprintf("unknown command %q; run \"idem help\" for the list", cmd)}
	}
}

// commandOptions is a sub-command's command line, parsed. Each command
// defines its flags on a FlagSet of its own, bound to its options' fields
// (flags); parseOptions parses the command line into them; validate
// returns the first mistake in it, a usageError, before anything is opened,
// and sets the fields derived from the flags; then the command's run(ctx,
// opts) does the work. A test can so walk every command's usage errors
// without starting anything (usage_test.go).
type commandOptions interface {
	flags(fs *flag.FlagSet)
	validate() error
	line() *commandLine
}

// commandLine is what parseOptions records besides the flags' values;
// every command's options embed it.
type commandLine struct {
	args  []string        // the positional arguments, in order
	given map[string]bool // the flags the command line set, by name
}

func (l *commandLine) line() *commandLine { return l }

// noArgs refuses positional arguments, for the commands cmd that take
// none.
func (l *commandLine) noArgs(cmd string) error {
	if len(l.args) > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q (run \"idem %s -h\")", cmd, l.args[0], cmd)}
	}
	return nil
}

// syntax says where a sub-command's flags may be.
type syntax int

const (
	// flagsFirst: the flags come before the arguments; the first
	// argument ends them.
	flagsFirst syntax = iota
	// flagsAnywhere: flags may follow the arguments too ("idem import
	// FILE --json").
	flagsAnywhere
)

// parseOptions parses args, the command line of the sub-command name, into
// o (see parse), and records its positional arguments and the flags it
// set.
func (m *Main) parseOptions(name, synopsis string, sx syntax, args []string, o commandOptions) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	o.flags(fs)
	l := o.line()
	var err error
	if sx == flagsAnywhere {
		l.args, err = m.parseInterspersed(fs, args, synopsis)
	} else {
		err = m.parse(fs, args, synopsis)
		l.args = fs.Args()
	}
	if err != nil {
		return err
	}
	l.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { l.given[f.Name] = true })
	return nil
}

// parseInterspersed parses args like parse, but lets flags come after the
// arguments too ("idem import FILE --json"): it parses, takes one
// argument, and parses the rest, until none is left. It returns the
// arguments in order.
func (m *Main) parseInterspersed(fs *flag.FlagSet, args []string, synopsis string) ([]string, error) {
	var positional []string
	for {
		if err := m.parse(fs, args, synopsis); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// parse parses a sub-command's flags and turns flag errors into usage
// errors. On -h it prints the usage to Stdout and returns flag.ErrHelp,
// which main treats as success; after a flag error the usage goes to
// Stderr.
func (m *Main) parse(fs *flag.FlagSet, args []string, synopsis string) error {
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.Usage = func() {
		fmt.Fprintf(&out, "Usage: idem %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		_, _ = m.Stdout.Write(out.Bytes())
		return err
	}
	_, _ = m.Stderr.Write(out.Bytes())
	fs.SetOutput(m.Stderr)
	if err != nil {
		return usageError{fmt.Sprintf("%s: %v (run \"idem %s -h\")", fs.Name(), err, fs.Name())}
	}
	return nil
}
