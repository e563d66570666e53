module fencegate-example

go 1.19

require fencegate/client v0.0.0

replace fencegate/client => ../../clients/go
