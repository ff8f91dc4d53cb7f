//go:build !linux

package modbus

import (
	"errors"
	"fmt"
)

// openSerial is only implemented on Linux, Pith's target.
func openSerial(path string, _ SerialConfig) (link, error) {
	return nil, fmt.Errorf("open serial %s: %w", path, errors.ErrUnsupported)
}
