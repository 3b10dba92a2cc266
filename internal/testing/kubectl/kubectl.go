// Package kubectltest runs Skiff's embedded kubectl inside a test, as a user
// would run kubectl, without a subprocess.
package kubectltest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/skiff-sh/skiff/internal/cli/kubectl"
)

// Run runs kubectl with args against the cluster of kubeconfig. stdin, when
// set, is written to a file that a "-" argument (as in "-f -") is replaced
// by. kubectl's fatal errors, which would exit the test binary, come back as
// err with kubectl's message at the end of stderr. (The fatal handler is
// process-wide; every run sets the same one, so parallel runs agree.)
func Run(t testing.TB, kubeconfig, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	args = append([]string(nil), args...)
	if stdin != "" {
		f := filepath.Join(t.TempDir(), "in.yaml")
		if werr := os.WriteFile(f, []byte(stdin), 0o600); werr != nil {
			t.Fatal(werr)
		}
		for i, a := range args {
			if a == "-" {
				args[i] = f
			}
		}
	}
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	all := append([]string{"--kubeconfig", kubeconfig, "--cache-dir", t.TempDir()}, args...)

	type fatal struct{ msg string }
	cmdutil.BehaviorOnFatal(func(msg string, code int) { panic(fatal{msg}) })
	defer cmdutil.DefaultBehaviorOnFatal()
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(fatal)
			if !ok {
				panic(p)
			}
			stdout, stderr, err = out.String(), errOut.String()+f.msg, errors.New("kubectl failed")
		}
	}()
	err = kubectl.New(all, streams).Execute()
	return out.String(), errOut.String(), err
}
