"""Reading the pool through a Prometheus that scrapes it: the query API (`api`), the batch that shares one
query among a tick's pollers (`batch`), the engines' instant reads (`source`) and range reads (`range`), the
hosts' exporters (`exporters`, `hosts`), and finding the engines it scrapes (`discovery`)."""
