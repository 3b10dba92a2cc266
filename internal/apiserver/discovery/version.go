package discovery

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/version"
)

// VersionInfo builds the /version document for gitVersion (for example
// "v1.37.2+skiff"): major and minor are taken from it, the emulation version
// equals it, the minimum compatibility version is one minor earlier, and the
// Go version, compiler and platform are this binary's.
func VersionInfo(gitVersion, gitCommit, buildDate string) version.Info {
	info := version.Info{
		GitVersion:   gitVersion,
		GitCommit:    gitCommit,
		GitTreeState: "clean",
		BuildDate:    buildDate,
		GoVersion:    runtime.Version(),
		Compiler:     runtime.Compiler,
		Platform:     fmt.Sprintf("%s/%s", runtime.GOOS, runtime.GOARCH),
	}
	parts := strings.SplitN(strings.TrimPrefix(gitVersion, "v"), ".", 3)
	if len(parts) >= 2 {
		major, errMajor := strconv.Atoi(parts[0])
		minor, errMinor := strconv.Atoi(parts[1])
		if errMajor == nil && errMinor == nil {
			info.Major, info.Minor = strconv.Itoa(major), strconv.Itoa(minor)
			info.EmulationMajor, info.EmulationMinor = info.Major, info.Minor
			if minor > 0 {
				info.MinCompatibilityMajor, info.MinCompatibilityMinor = info.Major, strconv.Itoa(minor-1)
			}
		}
	}
	return info
}
