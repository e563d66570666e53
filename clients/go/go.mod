module fencegate/client

go 1.19
