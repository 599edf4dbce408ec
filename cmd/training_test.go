package cmd

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
)

// trainingOf parses args with the flags of command and returns its
// training flags and the settings they give.
func trainingOf(t *testing.T, command trainingCommand, args []string) (*trainingFlags, node.Settings, error) {
	t.Helper()
	fs := flag.NewFlagSet(string(command), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var tf *trainingFlags
	switch command {
	case testnetCommand:
		var f testnetFlags
		f.register(fs)
		tf = &f.training
	case runCommand:
		var f runFlags
		f.register(fs)
		tf = &f.training
	default:
		tf = new(trainingFlags)
		tf.register(fs, simulateCommand)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%s %v: %v", command, args, err)
	}
	s, err := tf.settings(flagGiven(fs, "error-feedback"), flagGiven(fs, "staleness"))
	return tf, s, err
}

// The same training flags give the same settings and batch in testnet,
// run and simulate.
func TestTrainingFlagsGiveTheSameSettings(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want node.Settings
		// factors: simulate has no --sfb.
		factors bool
	}{
		// 30 iterations take 5 local steps (node.AutoLocalSteps) and so
		// staleness 1, in every command.
		{args: nil, want: node.Settings{Model: model.LogisticRegression, Optimizer: model.Adam, L2: 1e-4, Staleness: 1, Codec: "sketchml",
			ErrorFeedback: true, Factors: node.FactorsOff, LocalSteps: 5, Outer: node.OuterAdaptive, OuterRate: 1}},
		{args: []string{"--model", "svm", "--optimizer", "sgd", "--lr", "0.5", "--l2", "0", "--codec", "raw", "--error-feedback=false", "--staleness", "0", "--hash-bits", "18", "--local-steps", "1"},
			want: node.Settings{Model: model.LinearSVM, Optimizer: model.SGD, LearningRate: 0.5, Codec: "raw",
				Factors: node.FactorsOff, HashBits: 18, LocalSteps: 1, Outer: node.OuterAdaptive, OuterRate: 1}},
		// Four local steps take staleness 1 unless it is given.
		{args: []string{"--local-steps", "4", "--outer", "nesterov", "--outer-lr", "0.7"},
			want: node.Settings{Model: model.LogisticRegression, Optimizer: model.Adam, L2: 1e-4, Staleness: 1, Codec: "sketchml",
				ErrorFeedback: true, Factors: node.FactorsOff, LocalSteps: 4, Outer: node.OuterNesterov, OuterRate: 0.7}},
		// Factors turn error feedback off when it is not asked for, and
		// keep one step an exchange.
		{args: []string{"--model", "softmax", "--optimizer", "sgd", "--l2", "0", "--sfb", "auto"}, factors: true,
			want: node.Settings{Model: model.Softmax, Optimizer: model.SGD, Staleness: 2, Codec: "sketchml",
				Factors: node.FactorsAuto, LocalSteps: 1, Outer: node.OuterAdaptive, OuterRate: 1}},
	} {
		args := append([]string{"--iterations", "30", "--batch", "0.25"}, tc.args...)
		want := tc.want
		want.Iterations = 30
		for _, command := range []trainingCommand{testnetCommand, runCommand, simulateCommand} {
			if tc.factors && command == simulateCommand {
				continue
			}
			tf, got, err := trainingOf(t, command, args)
			if err != nil {
				t.Errorf("%s %v: %v", command, args, err)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %v:\n got %+v\nwant %+v", command, args, got, want)
			}
			if tf.batch != 0.25 || node.BatchRows(tf.batch, 10) != 3 {
				t.Errorf("%s: --batch 0.25 of 10 rows is %v, %d rows; want 3 (rounded up)", command, tf.batch, node.BatchRows(tf.batch, 10))
			}
		}
	}
}

// A bad training value is refused with the same line by every command.
func TestTrainingFlagsRefuseAlike(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "tree"}, `--model "tree": want one of lr, svm, linear, softmax`},
		{[]string{"--optimizer", "lbfgs"}, `--optimizer "lbfgs": want one of sgd, adam`},
		{[]string{"--lr", "-1"}, "--lr -1: want a finite value > 0, or 0 for the optimizer's default"},
		{[]string{"--l2", "-0.5"}, "--l2 -0.5: want a finite value >= 0"},
		{[]string{"--codec", "nope"}, `--codec "nope": want one of`},
		{[]string{"--staleness", "-1"}, "--staleness -1: want >= 0"},
		{[]string{"--batch", "2.5"}, "--batch 2.5: want a fraction in (0,1] or a whole row count"},
		{[]string{"--batch", "0"}, "--batch 0: want a fraction in (0,1] or a whole row count"},
		{[]string{"--hash-bits", "40"}, "--hash-bits: hash bits 40: want 1 to 30"},
		{[]string{"--local-steps", "0"}, "--local-steps 0: want 1 to 4096"},
		{[]string{"--outer", "adam"}, `--outer "adam": want one of adaptive, sgd, nesterov`},
		{[]string{"--eval-every", "-1"}, "--eval-every -1: want >= 0"},
		{[]string{"--log-level", "loud"}, `--log-level "loud": want debug, info, warn or error`},
	} {
		var lines []string
		for _, command := range []string{"testnet", "run", "simulate"} {
			args := append([]string{command, "--iterations", "5"}, tc.args...)
			if command == "run" {
				args = append(args, "--data", "rcv1", "--listen", "/ip4/127.0.0.1/tcp/0")
			}
			code, out, errOut := runMain(args...)
			line := strings.TrimSuffix(errOut, "\n")
			if code != 2 || out != "" || strings.Contains(line, "\n") || !strings.Contains(line, tc.want) {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", args, code, out, errOut, tc.want)
			}
			// The line starts with the command's name; the rest is the same.
			_, cause, _ := strings.Cut(line, command+": ")
			lines = append(lines, cause)
		}
		if lines[0] != lines[1] || lines[1] != lines[2] {
			t.Errorf("%v: testnet, run and simulate say %q", tc.args, lines)
		}
	}
	// The rules of sufficient factors are the same in testnet and run.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sfb", "always"}, "--sfb always: sufficient factors are for model softmax, not lr"},
		{[]string{"--model", "softmax", "--sfb", "auto"}, "--sfb auto: factors are exact only for plain SGD; optimizer adam"},
		{[]string{"--model", "softmax", "--optimizer", "sgd", "--sfb", "auto"}, "--sfb auto: an L2 term is not low-rank"},
		{[]string{"--model", "softmax", "--optimizer", "sgd", "--l2", "0", "--sfb", "auto", "--error-feedback"}, "--sfb auto: error feedback cannot ride on factors"},
		{[]string{"--model", "softmax", "--optimizer", "sgd", "--l2", "0", "--sfb", "auto", "--local-steps", "2"}, "--sfb auto: the change of 2 local steps has no sufficient factors"},
	} {
		for _, command := range []string{"testnet", "run"} {
			args := append([]string{command, "--data", "rcv1"}, tc.args...)
			if command == "run" {
				args = append(args, "--listen", "/ip4/127.0.0.1/tcp/0")
			}
			code, out, errOut := runMain(args...)
			if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", args, code, out, errOut, tc.want)
			}
		}
	}
}

// The model names of the help texts are model.Kinds, listed once.
func TestModelNames(t *testing.T) {
	if got := modelNames(false); got != "lr, svm, linear or softmax" {
		t.Errorf("modelNames(false) = %q", got)
	}
	if got := modelNames(true); got != "lr (logistic regression), svm (linear SVM), linear (least squares) or softmax (multinomial logistic regression)" {
		t.Errorf("modelNames(true) = %q", got)
	}
}
