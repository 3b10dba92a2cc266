package cronjob

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
)

// nextScheduleDelta is added to the wait for the next schedule so that the
// sync lands just after it, as upstream.
const nextScheduleDelta = 100 * time.Millisecond

// missed says how many start times were missed since the last schedule.
type missed int

const (
	noneMissed missed = iota
	fewMissed
	manyMissed // more than 100: the TooManyMissedTimes warning
)

// parseSchedule parses the CronJob's schedule in its time zone (standard
// five-field cron or a descriptor such as @hourly), the way upstream does:
// robfig/cron's standard parser with "TZ=<zone> " prepended.
func parseSchedule(cj *batchv1.CronJob) (s cron.Schedule, err error) {
	spec := cj.Spec.Schedule
	if !strings.Contains(spec, "TZ") && cj.Spec.TimeZone != nil {
		if _, lerr := time.LoadLocation(*cj.Spec.TimeZone); lerr == nil {
			spec = fmt.Sprintf("TZ=%s %s", *cj.Spec.TimeZone, spec)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("invalid schedule format: %v", r)
		}
	}()
	return cron.ParseStandard(spec)
}

// mostRecentScheduleTime returns the earliest time looked from, the latest
// start time in (earliest, now] (nil when none), and how many were missed.
// With withDeadline, start times older than startingDeadlineSeconds are
// not looked at.
func mostRecentScheduleTime(cj *batchv1.CronJob, now time.Time, s cron.Schedule, withDeadline bool) (time.Time, *time.Time, missed, error) {
	earliest := cj.CreationTimestamp.Time
	if cj.Status.LastScheduleTime != nil {
		earliest = cj.Status.LastScheduleTime.Time
	}
	if withDeadline && cj.Spec.StartingDeadlineSeconds != nil {
		if d := now.Add(-time.Duration(*cj.Spec.StartingDeadlineSeconds) * time.Second); d.After(earliest) {
			earliest = d
		}
	}
	t1 := s.Next(earliest)
	t2 := s.Next(t1)
	if now.Before(t1) {
		return earliest, nil, noneMissed, nil
	}
	if now.Before(t2) {
		return earliest, &t1, noneMissed, nil
	}
	// Many start times passed: count them arithmetically and look for the
	// latest near the end instead of walking them all.
	between := int64(t2.Sub(t1).Round(time.Second).Seconds())
	if between < 1 {
		return earliest, nil, noneMissed, errors.New("time difference between two schedules is less than 1 second")
	}
	count := int64(now.Sub(t1).Seconds())/between + 1
	var latest time.Time
	from := t1.Add(time.Duration((count-2)*between) * time.Second)
	for t := s.Next(from); !t.After(now); t = s.Next(t) {
		latest = t
	}
	m := fewMissed
	if count > 100 {
		m = manyMissed
	}
	if latest.IsZero() {
		return earliest, nil, m, nil
	}
	return earliest, &latest, m, nil
}

// nextScheduleWait is how long until just after the next start time.
func nextScheduleWait(cj *batchv1.CronJob, now time.Time, s cron.Schedule) time.Duration {
	earliest, latest, m, err := mostRecentScheduleTime(cj, now, s, false)
	from := now
	switch {
	case err != nil:
	case latest != nil:
		from = *latest
	case m == noneMissed:
		from = earliest
	}
	return s.Next(from).Add(nextScheduleDelta).Sub(now)
}

// jobName is "<cronjob>-<scheduled time in minutes since the epoch>".
func jobName(cj *batchv1.CronJob, scheduled time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, scheduled.Unix()/60)
}
