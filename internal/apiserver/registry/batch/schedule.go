package batch

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// cronField is one field of a standard five-field cron schedule.
type cronField struct {
	min, max int
	names    map[string]int
}

var (
	months = map[string]int{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}
	days   = map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

	cronFields = []cronField{
		{min: 0, max: 59},                // minute
		{min: 0, max: 23},                // hour
		{min: 1, max: 31},                // day of month
		{min: 1, max: 12, names: months}, // month
		{min: 0, max: 6, names: days},    // day of week
	}
	descriptors = map[string]bool{
		"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true,
		"@daily": true, "@midnight": true, "@hourly": true,
	}
)

// ParseSchedule checks a standard cron schedule (five fields, or a
// descriptor such as @hourly or "@every 1h30m"), the syntax upstream's
// CronJob controller accepts. The error texts follow the parser upstream
// uses.
func ParseSchedule(spec string) error {
	if len(spec) == 0 {
		return fmt.Errorf("empty spec string")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		i := strings.Index(spec, " ")
		if i < 0 {
			return fmt.Errorf("missing spec after timezone")
		}
		if _, err := time.LoadLocation(strings.SplitN(spec[:i], "=", 2)[1]); err != nil {
			return fmt.Errorf("provided bad location %s: %w", spec[:i], err)
		}
		spec = strings.TrimSpace(spec[i:])
	}
	if strings.HasPrefix(spec, "@") {
		if strings.HasPrefix(spec, "@every ") {
			d, err := time.ParseDuration(strings.TrimPrefix(spec, "@every "))
			if err != nil {
				return fmt.Errorf("failed to parse duration %s: %w", spec, err)
			}
			if d <= 0 {
				return fmt.Errorf("failed to parse duration %s: must be positive", spec)
			}
			return nil
		}
		if !descriptors[spec] {
			return fmt.Errorf("unrecognized descriptor: %s", spec)
		}
		return nil
	}
	parts := strings.Fields(spec)
	if len(parts) != len(cronFields) {
		return fmt.Errorf("expected exactly %d fields, found %d: %s", len(cronFields), len(parts), spec)
	}
	for i, p := range parts {
		if err := cronFields[i].check(p); err != nil {
			return err
		}
	}
	return nil
}

func (f cronField) check(expr string) error {
	for _, r := range strings.Split(expr, ",") {
		if err := f.checkRange(r); err != nil {
			return err
		}
	}
	return nil
}

func (f cronField) checkRange(expr string) error {
	rangeAndStep := strings.Split(expr, "/")
	if len(rangeAndStep) > 2 {
		return fmt.Errorf("too many slashes: %s", expr)
	}
	lowAndHigh := strings.Split(rangeAndStep[0], "-")
	if len(lowAndHigh) > 2 {
		return fmt.Errorf("too many hyphens: %s", expr)
	}
	start, end := f.min, f.max
	if lowAndHigh[0] != "*" && lowAndHigh[0] != "?" {
		var err error
		if start, err = f.value(lowAndHigh[0]); err != nil {
			return err
		}
		end = start
		if len(lowAndHigh) == 2 {
			if end, err = f.value(lowAndHigh[1]); err != nil {
				return err
			}
		}
	} else if len(lowAndHigh) == 2 {
		return fmt.Errorf("too many hyphens: %s", expr)
	}
	if len(rangeAndStep) == 2 {
		step, err := strconv.Atoi(rangeAndStep[1])
		if err != nil {
			return fmt.Errorf("failed to parse int from %s: %w", rangeAndStep[1], err)
		}
		if step <= 0 {
			return fmt.Errorf("step of range should be a positive number: %s", expr)
		}
	}
	switch {
	case start < f.min:
		return fmt.Errorf("beginning of range (%d) below minimum (%d): %s", start, f.min, expr)
	case end > f.max:
		return fmt.Errorf("end of range (%d) above maximum (%d): %s", end, f.max, expr)
	case start > end:
		return fmt.Errorf("beginning of range (%d) beyond end of range (%d): %s", start, end, expr)
	}
	return nil
}

func (f cronField) value(s string) (int, error) {
	if v, ok := f.names[strings.ToLower(s)]; ok {
		return v, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("failed to parse int from %s: %w", s, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("negative number (%d) not allowed: %s", n, s)
	}
	return n, nil
}
