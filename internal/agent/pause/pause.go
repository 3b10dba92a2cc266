// Package pause is the pod sandbox ("pause") image, built by Skiff itself.
//
// The image holds one file, /pause: a static Linux executable of 100 bytes
// of machine code that Skiff writes out itself, so neither a registry, a C
// toolchain nor a build step is needed (`go build` is enough). It does what
// upstream's pause does: it blocks SIGINT, SIGTERM and SIGCHLD and waits for
// them with rt_sigtimedwait; on SIGCHLD it reaps every exited child (it is
// PID 1 of the pod when the pod shares its process namespace); on SIGINT or
// SIGTERM it exits 0. Waiting on blocked signals also works as PID 1 of a
// namespace, where the kernel drops signals that have no handler.
package pause

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"

	"github.com/skiff-sh/skiff/internal/agent/images"
)

// Ref is the pause image's name: the one upstream's kubelet and kubeadm
// v1.37 default to and containerd 2.x uses as its sandbox image, so tools
// and tests that name it find it.
const Ref = "registry.k8s.io/pause:3.10.2"

// amd64Code is the program for x86-64 (Linux syscall numbers), assembled
// from:
//
//	_start: mov $0x14002,%eax      // set = {SIGINT, SIGTERM, SIGCHLD}
//	        push %rax
//	        mov $14,%eax           // rt_sigprocmask(SIG_BLOCK, &set, NULL, 8)
//	        xor %edi,%edi
//	        mov %rsp,%rsi
//	        xor %edx,%edx
//	        mov $8,%r10d
//	        syscall
//	wait:   mov $128,%eax          // sig = rt_sigtimedwait(&set, NULL, NULL, 8)
//	        mov %rsp,%rdi
//	        xor %esi,%esi
//	        xor %edx,%edx
//	        mov $8,%r10d
//	        syscall
//	        cmp $17,%eax           // SIGCHLD?
//	        jne other
//	reap:   mov $61,%eax           // wait4(-1, NULL, WNOHANG, NULL) until <= 0
//	        mov $-1,%rdi
//	        xor %esi,%esi
//	        mov $1,%edx
//	        xor %r10d,%r10d
//	        syscall
//	        test %eax,%eax
//	        jg reap
//	        jmp wait
//	other:  cmp $2,%eax            // SIGINT or SIGTERM: exit_group(0)
//	        je quit
//	        cmp $15,%eax
//	        jne wait               // EINTR and the like: wait again
//	quit:   mov $231,%eax
//	        xor %edi,%edi
//	        syscall
var amd64Code = []byte{
	0xb8, 0x02, 0x40, 0x01, 0x00, 0x50, 0xb8, 0x0e, 0x00, 0x00, 0x00, 0x31, 0xff, 0x48, 0x89, 0xe6,
	0x31, 0xd2, 0x41, 0xba, 0x08, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xb8, 0x80, 0x00, 0x00, 0x00, 0x48,
	0x89, 0xe7, 0x31, 0xf6, 0x31, 0xd2, 0x41, 0xba, 0x08, 0x00, 0x00, 0x00, 0x0f, 0x05, 0x83, 0xf8,
	0x11, 0x75, 0x1e, 0xb8, 0x3d, 0x00, 0x00, 0x00, 0x48, 0xc7, 0xc7, 0xff, 0xff, 0xff, 0xff, 0x31,
	0xf6, 0xba, 0x01, 0x00, 0x00, 0x00, 0x45, 0x31, 0xd2, 0x0f, 0x05, 0x85, 0xc0, 0x7f, 0xe4, 0xeb,
	0xc9, 0x83, 0xf8, 0x02, 0x74, 0x05, 0x83, 0xf8, 0x0f, 0x75, 0xbf, 0xb8, 0xe7, 0x00, 0x00, 0x00,
	0x31, 0xff, 0x0f, 0x05,
}

// Binary returns the pause executable for goarch: a 64-bit ELF with one
// loadable segment. Only amd64 has one today; elsewhere set the agent's
// sandbox image to one from a registry.
func Binary(goarch string) ([]byte, error) {
	switch goarch {
	case "amd64":
		return elf64(0x3e /* EM_X86_64 */, amd64Code), nil
	default:
		return nil, fmt.Errorf("no built-in pause program for %s", goarch)
	}
}

// elf64 wraps code in a minimal little-endian ELF executable loaded at
// 0x400000, entry right after the headers.
func elf64(machine uint16, code []byte) []byte {
	const (
		base    = 0x400000
		ehsize  = 64
		phsize  = 56
		entryAt = ehsize + phsize
	)
	var b bytes.Buffer
	le := binary.LittleEndian
	w := func(v any) { _ = binary.Write(&b, le, v) }
	// ELF header.
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* LE */, 1 /* version */, 0 /* SysV */})
	b.Write(make([]byte, 8))
	w(uint16(2)) // ET_EXEC
	w(machine)
	w(uint32(1))              // version
	w(uint64(base + entryAt)) // entry
	w(uint64(ehsize))         // program headers offset
	w(uint64(0))              // section headers offset
	w(uint32(0))              // flags
	w(uint16(ehsize))
	w(uint16(phsize))
	w(uint16(1)) // one program header
	w(uint16(0)) // section header size
	w(uint16(0)) // no sections
	w(uint16(0)) // no section names
	// Program header: PT_LOAD, read+execute, the whole file.
	size := uint64(entryAt + len(code))
	w(uint32(1))      // PT_LOAD
	w(uint32(5))      // PF_R|PF_X
	w(uint64(0))      // offset
	w(uint64(base))   // vaddr
	w(uint64(base))   // paddr
	w(size)           // file size
	w(size)           // memory size
	w(uint64(0x1000)) // alignment
	b.Write(code)
	return b.Bytes()
}

// WriteImage writes the pause image, tagged Ref, as a docker-archive
// tarball for the running architecture.
func WriteImage(w io.Writer) error {
	bin, err := Binary(runtime.GOARCH)
	if err != nil {
		return err
	}
	return images.Write(w, []string{Ref}, []images.File{{Path: "/pause", Mode: 0o755, Data: bin}}, images.Config{Entrypoint: []string{"/pause"}})
}
