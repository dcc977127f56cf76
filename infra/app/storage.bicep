// One account for the Functions host (blobs, queues, tables), the deployment package and the
// state store (Table Storage). Shared keys are disabled: everything goes through Entra ID.
param name string
param location string
param tags object
param deploymentContainerName string
@description('Where purged orders are archived (gzip\'d JSON lines per day; docs/operations.md "Retention").')
param archiveContainerName string = 'order-archive'
@description('Days after its last write an archive blob moves to the cool tier, then to the archive tier.')
param archiveCoolAfterDays int = 30
param archiveArchiveAfterDays int = 180

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    dnsEndpointType: 'Standard'
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }

  resource blobServices 'blobServices' = {
    name: 'default'

    // Flex Consumption reads the app package from here with the app's identity.
    resource deploymentContainer 'containers' = {
      name: deploymentContainerName
      properties: {
        publicAccess: 'None'
      }
    }

    // The retention purge writes each purged order here before deleting it.
    resource archiveContainer 'containers' = {
      name: archiveContainerName
      properties: {
        publicAccess: 'None'
      }
    }
  }

  // Archive blobs are written once, in the days after their orders expire, then only read on an
  // operator's request: cool, then the archive tier (a read then needs a rehydration first).
  resource lifecycle 'managementPolicies' = {
    name: 'default'
    properties: {
      policy: {
        rules: [
          {
            name: 'order-archive-tiering'
            enabled: true
            type: 'Lifecycle'
            definition: {
              filters: {
                blobTypes: ['blockBlob']
                prefixMatch: ['${archiveContainerName}/orders/']
              }
              actions: {
                baseBlob: {
                  tierToCool: { daysAfterModificationGreaterThan: archiveCoolAfterDays }
                  tierToArchive: { daysAfterModificationGreaterThan: archiveArchiveAfterDays }
                }
              }
            }
          }
        ]
      }
    }
    dependsOn: [blobServices::archiveContainer]
  }
}

output name string = storage.name
output archiveContainerName string = storage::blobServices::archiveContainer.name
output blobServiceUri string = storage.properties.primaryEndpoints.blob
output queueServiceUri string = storage.properties.primaryEndpoints.queue
output tableServiceUri string = storage.properties.primaryEndpoints.table
