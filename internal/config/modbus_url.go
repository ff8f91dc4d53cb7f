package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Link schemes of a Modbus client URL.
const (
	SchemeTCP        = "tcp"        // Modbus TCP (MBAP framing)
	SchemeRTU        = "rtu"        // Modbus RTU on a serial port
	SchemeRTUOverTCP = "rtuovertcp" // RTU frames through a TCP serial gateway
)

// Endpoint is a parsed Modbus client URL.
type Endpoint struct {
	// Scheme is SchemeTCP, SchemeRTU or SchemeRTUOverTCP.
	Scheme string
	// Address is host:port for the TCP schemes; the port defaults to 502.
	Address string
	// Device is the serial device path for SchemeRTU.
	Device string
	// Baud, Parity ('N', 'E' or 'O'), StopBits (1 or 2) and DataBits (7
	// or 8) are the serial settings of SchemeRTU, zero otherwise. They
	// default to the Modbus serial line defaults, 19200 8E1.
	Baud     int
	Parity   byte
	StopBits int
	DataBits int
}

// IsSerial reports whether the endpoint is a local serial port.
func (e Endpoint) IsSerial() bool { return e.Scheme == SchemeRTU }

// Endpoint parses the station's URL.
func (c *ModbusClient) Endpoint() (Endpoint, error) { return ParseModbusURL(c.URL) }

// ParseModbusURL parses a Modbus client URL:
//
//	tcp://host[:port]                 Modbus TCP, port 502 by default
//	rtuovertcp://host[:port]          RTU frames over TCP, port 502 by default
//	rtu:///dev/ttyUSB0[?baud=9600&parity=N&stop=1&data=8]
//
// Serial settings default to 19200 baud, even parity, 1 stop bit, 8 data
// bits, the defaults of the Modbus serial line specification.
func ParseModbusURL(raw string) (Endpoint, error) {
	ep, err := parseModbusURL(raw)
	if err != nil {
		return Endpoint{}, fmt.Errorf("parse modbus url %q: %w", raw, err)
	}
	return ep, nil
}

func parseModbusURL(raw string) (Endpoint, error) {
	if raw == "" {
		return Endpoint{}, errors.New("url is empty (want tcp://host:port, rtuovertcp://host:port or rtu:///dev/DEVICE)")
	}
	if !strings.Contains(raw, "://") {
		return Endpoint{}, errors.New("url has no scheme (want tcp://host:port, rtuovertcp://host:port or rtu:///dev/DEVICE)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Endpoint{}, err
	}
	if u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return Endpoint{}, errors.New("url has parts a modbus url does not use (user, fragment or opaque)")
	}
	switch u.Scheme {
	case SchemeTCP, SchemeRTUOverTCP:
		if u.Path != "" && u.Path != "/" {
			return Endpoint{}, fmt.Errorf("%s url takes no path, got %q", u.Scheme, u.Path)
		}
		if u.RawQuery != "" {
			return Endpoint{}, fmt.Errorf("%s url takes no query, got %q", u.Scheme, u.RawQuery)
		}
		if u.Hostname() == "" {
			return Endpoint{}, fmt.Errorf("%s url needs a host, as in %s://127.0.0.1:502", u.Scheme, u.Scheme)
		}
		port := u.Port()
		if port == "" {
			if strings.HasSuffix(u.Host, ":") {
				return Endpoint{}, errors.New("port is empty")
			}
			port = strconv.Itoa(DefaultModbusTCPPort)
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return Endpoint{}, fmt.Errorf("port %q is not a number 1..65535", port)
		}
		return Endpoint{Scheme: u.Scheme, Address: net.JoinHostPort(u.Hostname(), port)}, nil
	case SchemeRTU:
		return parseSerial(u)
	default:
		return Endpoint{}, fmt.Errorf("unknown scheme %q (want tcp, rtu or rtuovertcp)", u.Scheme)
	}
}

// parseSerial parses an rtu: URL.
func parseSerial(u *url.URL) (Endpoint, error) {
	if u.Host != "" || !strings.HasPrefix(u.Path, "/") || len(u.Path) < 2 {
		return Endpoint{}, errors.New("rtu url needs an absolute device path, as in rtu:///dev/ttyUSB0")
	}
	ep := Endpoint{
		Scheme:   SchemeRTU,
		Device:   u.Path,
		Baud:     DefaultSerialBaud,
		Parity:   DefaultSerialParity,
		StopBits: DefaultSerialStopBits,
		DataBits: DefaultSerialDataBits,
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Endpoint{}, fmt.Errorf("parse query: %w", err)
	}
	// Sorted keys make the first error reported the same on every run.
	for _, key := range slices.Sorted(maps.Keys(q)) {
		vals := q[key]
		if len(vals) != 1 {
			return Endpoint{}, fmt.Errorf("query parameter %q is given %d times", key, len(vals))
		}
		v := vals[0]
		switch key {
		case "baud":
			n, err := strconv.Atoi(v)
			if err != nil || n < 50 || n > 4_000_000 {
				return Endpoint{}, fmt.Errorf("baud %q is not a rate 50..4000000", v)
			}
			ep.Baud = n
		case "parity":
			switch strings.ToUpper(v) {
			case "N", "E", "O":
				ep.Parity = strings.ToUpper(v)[0]
			default:
				return Endpoint{}, fmt.Errorf("parity %q is not N, E or O", v)
			}
		case "stop":
			if v != "1" && v != "2" {
				return Endpoint{}, fmt.Errorf("stop bits %q is not 1 or 2", v)
			}
			ep.StopBits = int(v[0] - '0')
		case "data":
			if v != "7" && v != "8" {
				return Endpoint{}, fmt.Errorf("data bits %q is not 7 or 8", v)
			}
			ep.DataBits = int(v[0] - '0')
		default:
			return Endpoint{}, fmt.Errorf("unknown query parameter %q (want baud, parity, stop, data)", key)
		}
	}
	return ep, nil
}
