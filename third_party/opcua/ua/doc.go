// Copyright 2018-2020 opcua authors. All rights reserved.
// Use of this source code is governed by a MIT-style license that can be
// found in the LICENSE file.

// Package ua defines the structures, decoders and encoder
// for built-in data types described in Part 6 Section 5 Data encoding
// and for services in OPC UA Binary Protocol.
package ua
