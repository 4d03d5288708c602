// Command postgres consumes a PostgreSQL publication through logical
// replication with a durable cursor.
package main

func main() {}
