package modbus

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// serialLink is a serial port opened non-blocking, so that the Go runtime
// poller drives it and read deadlines work like on a socket.
type serialLink struct {
	*os.File
}

// FlushInput drops bytes received but not read yet.
func (s serialLink) FlushInput() error {
	rc, err := s.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetInt(int(fd), unix.TCFLSH, unix.TCIFLUSH)
	}); err != nil {
		return err
	}
	return ierr
}

var baudRates = map[int]uint32{
	1200: unix.B1200, 2400: unix.B2400, 4800: unix.B4800, 9600: unix.B9600,
	19200: unix.B19200, 38400: unix.B38400, 57600: unix.B57600, 115200: unix.B115200,
	230400: unix.B230400, 460800: unix.B460800, 921600: unix.B921600,
}

// openSerial opens a serial device in raw mode with the given line
// settings.
func openSerial(path string, cfg SerialConfig) (link, error) {
	speed, ok := baudRates[cfg.Baud]
	if !ok {
		return nil, fmt.Errorf("open serial %s: unsupported baud rate %d", path, cfg.Baud)
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open serial %s: %w", path, err)
	}
	if err := setTermios(fd, speed, cfg); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("configure serial %s: %w", path, err)
	}
	return serialLink{os.NewFile(uintptr(fd), path)}, nil
}

func setTermios(fd int, speed uint32, cfg SerialConfig) error {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return err
	}
	// Raw mode: no line editing, no echo, no signals, no translation of
	// CR/LF and no software flow control; Modbus bytes are binary.
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR |
		unix.ICRNL | unix.IXON | unix.IXOFF | unix.IXANY | unix.INPCK
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB | unix.PARODD | unix.CSTOPB | unix.CRTSCTS | unix.CBAUD
	t.Cflag |= unix.CREAD | unix.CLOCAL | speed
	t.Ispeed, t.Ospeed = speed, speed
	switch cfg.DataBits {
	case 5:
		t.Cflag |= unix.CS5
	case 6:
		t.Cflag |= unix.CS6
	case 7:
		t.Cflag |= unix.CS7
	default:
		t.Cflag |= unix.CS8
	}
	switch cfg.Parity {
	case 'E':
		t.Cflag |= unix.PARENB
		t.Iflag |= unix.INPCK
	case 'O':
		t.Cflag |= unix.PARENB | unix.PARODD
		t.Iflag |= unix.INPCK
	}
	if cfg.StopBits == 2 {
		t.Cflag |= unix.CSTOPB
	}
	// VMIN 1 and VTIME 0: a read returns as soon as a byte is there; the
	// poller and the deadline do the waiting.
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	return unix.IoctlSetTermios(fd, unix.TCSETS, t)
}

var (
	_ link         = serialLink{}
	_ inputFlusher = serialLink{}
)
