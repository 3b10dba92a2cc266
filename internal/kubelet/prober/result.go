package prober

// Kind is what a probe decides: liveness, readiness or startup.
type Kind int

const (
	Liveness Kind = iota
	Readiness
	Startup
)

func (k Kind) String() string {
	switch k {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	}
	return "Unknown"
}

// Result is the current verdict of a probe worker.
type Result int

const (
	Unknown Result = iota
	Success
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	}
	return "Unknown"
}
